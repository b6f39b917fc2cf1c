/* JSON codecs of the secure-aggregation messages (docs/wire-secure-sum.md).
 *
 * Error codes of the decoders, so services can map them to HTTP directly
 * (fs_http_problem_err): a missing field, a wrong JSON type, bad base64 is
 * FS_EFORMAT (400); a well-formed value that is wrong (byte length, id out
 * of range, duplicate, unknown field, unknown kind) is FS_EINVAL (422); more
 * entries than the caller's cap is FS_ERANGE (413). */
#include "wire.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/crypto/ct.h"

static const char B64URL[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* ------------------------------------------------------------ base64url */

char *fs_b64url_encode(const uint8_t *in, size_t n)
{
    size_t full = n / 3;
    size_t rem = n % 3;
    size_t olen;
    char *out;
    char *p;

    if (n > (SIZE_MAX - 4) / 4 * 3) {
        return NULL;
    }
    olen = full * 4 + (rem == 0 ? 0 : rem + 1);
    out = malloc(olen + 1);
    if (out == NULL) {
        return NULL;
    }
    p = out;
    for (size_t i = 0; i < full; i++) {
        uint32_t v = ((uint32_t)in[3 * i] << 16) | ((uint32_t)in[3 * i + 1] << 8) | in[3 * i + 2];
        *p++ = B64URL[(v >> 18) & 63];
        *p++ = B64URL[(v >> 12) & 63];
        *p++ = B64URL[(v >> 6) & 63];
        *p++ = B64URL[v & 63];
    }
    if (rem == 1) {
        uint32_t v = (uint32_t)in[3 * full] << 16;
        *p++ = B64URL[(v >> 18) & 63];
        *p++ = B64URL[(v >> 12) & 63];
    } else if (rem == 2) {
        uint32_t v = ((uint32_t)in[3 * full] << 16) | ((uint32_t)in[3 * full + 1] << 8);
        *p++ = B64URL[(v >> 18) & 63];
        *p++ = B64URL[(v >> 12) & 63];
        *p++ = B64URL[(v >> 6) & 63];
    }
    *p = '\0';
    return out;
}

static int b64_val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '-') {
        return 62;
    }
    if (c == '_') {
        return 63;
    }
    return -1;
}

/* Decoded length of a base64url string of slen characters, or error. */
static int b64_len(size_t slen, size_t *n, struct fs_err *err)
{
    if (slen % 4 == 1) {
        return fs_err_set(err, FS_EFORMAT, "base64url: impossible length %zu", slen);
    }
    *n = slen / 4 * 3 + (slen % 4 == 0 ? 0 : slen % 4 - 1);
    return 0;
}

/* Decode slen characters into out (exactly the length b64_len gave). Rejects
 * padding, characters outside the url alphabet and non-zero unused bits (so
 * every byte string has exactly one accepted encoding). */
static int b64_decode(const char *s, size_t slen, uint8_t *out, struct fs_err *err)
{
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;

    for (size_t i = 0; i < slen; i++) {
        int v = b64_val((unsigned char)s[i]);
        if (v < 0) {
            if (s[i] == '=') {
                return fs_err_set(err, FS_EFORMAT, "base64url: padding is not allowed");
            }
            return fs_err_set(err, FS_EFORMAT, "base64url: bad character at offset %zu", i);
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) {
        return fs_err_set(err, FS_EFORMAT, "base64url: non-canonical trailing bits");
    }
    return 0;
}

int fs_b64url_decode_exact(const char *s, uint8_t *out, size_t want, struct fs_err *err)
{
    size_t slen;
    size_t n = 0;
    int rc;

    if (s == NULL) {
        return fs_err_set(err, FS_EFORMAT, "base64url: missing");
    }
    slen = strnlen(s, (want / 3 + 2) * 4 + 1);
    if (s[slen] != '\0') {
        return fs_err_set(err, FS_EINVAL, "expected %zu bytes, got more", want);
    }
    rc = b64_len(slen, &n, err);
    if (rc != 0) {
        return rc;
    }
    if (n != want) {
        /* a malformed string of the wrong length is still reported as malformed */
        for (size_t i = 0; i < slen; i++) {
            if (b64_val((unsigned char)s[i]) < 0) {
                return fs_err_set(err, FS_EFORMAT, "base64url: bad character at offset %zu", i);
            }
        }
        return fs_err_set(err, FS_EINVAL, "expected %zu bytes, got %zu", want, n);
    }
    rc = b64_decode(s, slen, out, err);
    if (rc != 0) {
        fs_wipe(out, want);
    }
    return rc;
}

int fs_b64url_decode_alloc(const char *s, size_t cap, uint8_t **out, size_t *n, struct fs_err *err)
{
    size_t slen;
    size_t len = 0;
    uint8_t *buf = NULL;
    int rc;

    *out = NULL;
    *n = 0;
    if (s == NULL) {
        return fs_err_set(err, FS_EFORMAT, "base64url: missing");
    }
    if (cap > (SIZE_MAX - 8) / 4 * 3) {
        cap = (SIZE_MAX - 8) / 4 * 3;
    }
    slen = strnlen(s, (cap / 3 + 2) * 4 + 1);
    if (s[slen] != '\0') {
        return fs_err_set(err, FS_ERANGE, "base64url: more than %zu bytes", cap);
    }
    rc = b64_len(slen, &len, err);
    if (rc != 0) {
        return rc;
    }
    if (len > cap) {
        return fs_err_set(err, FS_ERANGE, "base64url: more than %zu bytes", cap);
    }
    buf = malloc(len + 1);
    if (buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "base64url: out of memory");
    }
    rc = b64_decode(s, slen, buf, err);
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *out = buf;
    *n = len;
    return 0;
}

/* ------------------------------------------------------------ helpers */

/* Reject keys not in allowed (NULL-terminated). */
static int check_keys(const json_t *obj, const char *const *allowed, const char *what,
                      struct fs_err *err)
{
    const char *key;
    json_t *val;

    json_object_foreach((json_t *)obj, key, val)
    {
        int ok = 0;
        (void)val;
        for (size_t i = 0; allowed[i] != NULL; i++) {
            if (strcmp(key, allowed[i]) == 0) {
                ok = 1;
                break;
            }
        }
        if (!ok) {
            return fs_err_set(err, FS_EINVAL, "%s: unknown field \"%.64s\"", what, key);
        }
    }
    return 0;
}

static int want_object(const json_t *j, const char *what, struct fs_err *err)
{
    if (!json_is_object(j)) {
        return fs_err_set(err, FS_EFORMAT, "%s: expected an object", what);
    }
    return 0;
}

/* An integer field in lo..hi. */
static int get_int(const json_t *obj, const char *key, long long lo, long long hi, const char *what,
                   long long *out, struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);
    long long x;

    if (v == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: missing", what, key);
    }
    if (!json_is_integer(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected an integer", what, key);
    }
    x = (long long)json_integer_value(v);
    if (x < lo || x > hi) {
        return fs_err_set(err, FS_EINVAL, "%s.%s: %lld outside %lld..%lld", what, key, x, lo, hi);
    }
    *out = x;
    return 0;
}

/* A base64url field of exactly n bytes. */
static int get_bytes(const json_t *obj, const char *key, uint8_t *out, size_t n, const char *what,
                     struct fs_err *err)
{
    json_t *v = json_object_get(obj, key);
    int rc;

    if (v == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: missing", what, key);
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected a base64url string", what, key);
    }
    rc = fs_b64url_decode_exact(json_string_value(v), out, n, err);
    if (rc != 0) {
        fs_err_prefix(err, "%s.%s: ", what, key);
    }
    return rc;
}

/* Add key: base64url(in). Returns -1 on OOM. */
static int set_bytes(json_t *obj, const char *key, const uint8_t *in, size_t n)
{
    char *s = fs_b64url_encode(in, n);
    json_t *v;

    if (s == NULL) {
        return -1;
    }
    v = json_string(s);
    free(s);
    if (v == NULL) {
        return -1;
    }
    return json_object_set_new(obj, key, v);
}

/* The array under key of obj, at most max entries. */
static int get_array(const json_t *obj, const char *key, size_t max, const char *what, json_t **arr,
                     struct fs_err *err)
{
    json_t *a = json_object_get(obj, key);

    if (a == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: missing", what, key);
    }
    if (!json_is_array(a)) {
        return fs_err_set(err, FS_EFORMAT, "%s.%s: expected an array", what, key);
    }
    if (json_array_size(a) > max) {
        return fs_err_set(err, FS_ERANGE, "%s.%s: %zu entries, at most %zu allowed", what, key,
                          json_array_size(a), max);
    }
    *arr = a;
    return 0;
}

/* ------------------------------------------------------------ R0 */

static json_t *adv_encode(const struct fs_secagg_adv *a, int with_exp, int has_exp, int max_abs_exp)
{
    json_t *o = json_object();

    if (o == NULL) {
        return NULL;
    }
    if (json_object_set_new(o, "party", json_integer(a->id)) != 0 ||
        set_bytes(o, "sign_pk", a->sign_pk, FS_SECAGG_KEY_LEN) != 0 ||
        set_bytes(o, "c_pk", a->c_pk, FS_SECAGG_KEY_LEN) != 0 || a->s_pks == NULL ||
        set_bytes(o, "s_pks", a->s_pks, (size_t)a->nkeys * FS_SECAGG_KEY_LEN) != 0 ||
        set_bytes(o, "sig", a->sig, FS_SECAGG_SIG_LEN) != 0) {
        json_decref(o);
        return NULL;
    }
    if (with_exp && json_object_set_new(o, "max_abs_exp",
                                        has_exp ? json_integer(max_abs_exp) : json_null()) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *fs_wire_adv_encode(const struct fs_secagg_adv *a, int has_exp, int max_abs_exp)
{
    return adv_encode(a, 1, has_exp, max_abs_exp);
}

/* a->s_pks (new buffer) and a->nkeys from "s_pks": base64url of one 32-byte
 * key per aggregation, 1..FS_SECAGG_MAX_AGGREGATIONS of them. */
static int get_mask_keys(const json_t *j, const char *what, struct fs_secagg_adv *a,
                         struct fs_err *err)
{
    json_t *v = json_object_get(j, "s_pks");
    size_t slen;
    size_t n = 0;
    int rc;

    if (v == NULL) {
        return fs_err_set(err, FS_EFORMAT, "%s.s_pks: missing", what);
    }
    if (!json_is_string(v)) {
        return fs_err_set(err, FS_EFORMAT, "%s.s_pks: expected a base64url string", what);
    }
    slen = json_string_length(v);
    rc = b64_len(slen, &n, err);
    if (rc != 0) {
        fs_err_prefix(err, "%s.s_pks: ", what);
        return rc;
    }
    if (n == 0 || n % FS_SECAGG_KEY_LEN != 0 ||
        n / FS_SECAGG_KEY_LEN > FS_SECAGG_MAX_AGGREGATIONS) {
        return fs_err_set(err, FS_EINVAL,
                          "%s.s_pks: %zu bytes, want 1 to %d keys of %d bytes (one per "
                          "aggregation)",
                          what, n, FS_SECAGG_MAX_AGGREGATIONS, FS_SECAGG_KEY_LEN);
    }
    a->s_pks = malloc(n);
    if (a->s_pks == NULL) {
        return fs_err_set(err, FS_ENOMEM, "%s.s_pks: out of memory", what);
    }
    a->nkeys = (uint32_t)(n / FS_SECAGG_KEY_LEN);
    rc = fs_b64url_decode_exact(json_string_value(v), a->s_pks, n, err);
    if (rc != 0) {
        fs_err_prefix(err, "%s.s_pks: ", what);
    }
    return rc;
}

static int adv_decode(const json_t *j, const char *what, struct fs_secagg_adv *a, int *has_exp,
                      int *max_abs_exp, struct fs_err *err)
{
    static const char *const keys[] = {"party", "sign_pk",     "c_pk", "s_pks",
                                       "sig",   "max_abs_exp", NULL};
    long long party = 0;
    json_t *e;
    int rc;

    memset(a, 0, sizeof *a);
    rc = want_object(j, what, err);
    if (rc == 0) {
        rc = check_keys(j, keys, what, err);
    }
    if (rc == 0) {
        rc = get_int(j, "party", 1, FS_SECAGG_MAX_PARTIES, what, &party, err);
    }
    if (rc == 0) {
        rc = get_bytes(j, "sign_pk", a->sign_pk, FS_SECAGG_KEY_LEN, what, err);
    }
    if (rc == 0) {
        rc = get_bytes(j, "c_pk", a->c_pk, FS_SECAGG_KEY_LEN, what, err);
    }
    if (rc == 0) {
        rc = get_mask_keys(j, what, a, err);
    }
    if (rc == 0) {
        rc = get_bytes(j, "sig", a->sig, FS_SECAGG_SIG_LEN, what, err);
    }
    if (rc != 0) {
        fs_secagg_adv_clear(a);
        return rc;
    }
    a->id = (uint32_t)party;
    if (has_exp != NULL) {
        *has_exp = 0;
    }
    if (max_abs_exp != NULL) {
        *max_abs_exp = 0;
    }
    e = json_object_get(j, "max_abs_exp");
    if (e != NULL && !json_is_null(e)) {
        long long x = 0;
        /* frexp of a finite nonzero double gives -1073..1024 */
        rc = get_int(j, "max_abs_exp", FS_WIRE_MIN_EXP, FS_WIRE_MAX_EXP, what, &x, err);
        if (rc != 0) {
            fs_secagg_adv_clear(a);
            return rc;
        }
        if (has_exp != NULL) {
            *has_exp = 1;
        }
        if (max_abs_exp != NULL) {
            *max_abs_exp = (int)x;
        }
    }
    return 0;
}

int fs_wire_adv_decode(const json_t *j, struct fs_secagg_adv *a, int *has_exp, int *max_abs_exp,
                       struct fs_err *err)
{
    return adv_decode(j, "advert", a, has_exp, max_abs_exp, err);
}

json_t *fs_wire_roster_encode(const struct fs_secagg_adv *r, size_t k)
{
    json_t *o = json_object();
    json_t *arr = json_array();

    if (o == NULL || arr == NULL || json_object_set_new(o, "roster", arr) != 0) {
        json_decref(o);
        return NULL;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *a = adv_encode(&r[i], 0, 0, 0);
        if (a == NULL || json_array_append_new(arr, a) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

/* One allocation holding n + 1 advertisements and then every mask key, the
 * s_pks pointing into it: the caller releases the whole roster with free(). */
static int roster_flatten(const struct fs_secagg_adv *r, size_t n, struct fs_secagg_adv **out,
                          struct fs_err *err)
{
    size_t head = (n + 1) * sizeof *r;
    size_t keys = 0;
    struct fs_secagg_adv *flat;
    uint8_t *p;

    for (size_t i = 0; i < n; i++) {
        keys += (size_t)r[i].nkeys * FS_SECAGG_KEY_LEN;
    }
    flat = calloc(1, head + keys);
    if (flat == NULL) {
        return fs_err_set(err, FS_ENOMEM, "roster: out of memory");
    }
    p = (uint8_t *)flat + head;
    for (size_t i = 0; i < n; i++) {
        size_t b = (size_t)r[i].nkeys * FS_SECAGG_KEY_LEN;
        flat[i] = r[i];
        memcpy(p, r[i].s_pks, b);
        flat[i].s_pks = p;
        p += b;
    }
    *out = flat;
    return 0;
}

int fs_wire_roster_decode(const json_t *j, size_t max, struct fs_secagg_adv **out, size_t *k,
                          struct fs_err *err)
{
    static const char *const keys[] = {"roster", NULL};
    struct fs_secagg_adv *r = NULL;
    json_t *arr = NULL;
    size_t n;
    int rc;

    *out = NULL;
    *k = 0;
    rc = want_object(j, "roster", err);
    if (rc == 0) {
        rc = check_keys(j, keys, "roster", err);
    }
    if (rc == 0) {
        rc = get_array(j, "roster", max, "", &arr, err);
    }
    if (rc != 0) {
        return rc;
    }
    n = json_array_size(arr);
    r = calloc(n + 1, sizeof *r);
    if (r == NULL) {
        return fs_err_set(err, FS_ENOMEM, "roster: out of memory");
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char what[48];
        snprintf(what, sizeof what, "roster[%zu]", i);
        rc = adv_decode(json_array_get(arr, i), what, &r[i], NULL, NULL, err);
        for (size_t q = 0; rc == 0 && q < i; q++) {
            if (r[q].id == r[i].id) {
                rc = fs_err_set(err, FS_EINVAL, "roster[%zu].party: %u repeated", i, r[i].id);
            }
        }
    }
    if (rc == 0) {
        rc = roster_flatten(r, n, out, err);
    }
    for (size_t i = 0; i < n; i++) {
        fs_secagg_adv_clear(&r[i]);
    }
    free(r);
    if (rc == 0) {
        *k = n;
    }
    return rc;
}

/* ------------------------------------------------------------ R1 */

json_t *fs_wire_shares_encode(const struct fs_secagg_share_ct *const *cts, size_t k, int use_from)
{
    json_t *o = json_object();
    json_t *arr = json_array();

    if (o == NULL || arr == NULL || json_object_set_new(o, "shares", arr) != 0) {
        json_decref(o);
        return NULL;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_object();
        uint32_t peer = use_from ? cts[i]->from : cts[i]->to;
        if (e == NULL || json_array_append_new(arr, e) != 0 ||
            json_object_set_new(e, use_from ? "from" : "to", json_integer(peer)) != 0 ||
            set_bytes(e, "ct", cts[i]->ct, cts[i]->len) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int fs_wire_shares_decode(const json_t *j, int use_from, uint32_t self, size_t ct_len, size_t max,
                          struct fs_secagg_share_ct **out, size_t *k, struct fs_err *err)
{
    static const char *const keys[] = {"shares", NULL};
    const char *peer_key = use_from ? "from" : "to";
    const char *const ekeys[] = {peer_key, "ct", NULL};
    struct fs_secagg_share_ct *cts = NULL;
    json_t *arr = NULL;
    size_t n;
    int rc;

    *out = NULL;
    *k = 0;
    rc = want_object(j, "shares", err);
    if (rc == 0) {
        rc = check_keys(j, keys, "shares", err);
    }
    if (rc == 0) {
        rc = get_array(j, "shares", max, "", &arr, err);
    }
    if (rc != 0) {
        return rc;
    }
    n = json_array_size(arr);
    cts = calloc(n + 1, sizeof *cts);
    if (cts == NULL) {
        return fs_err_set(err, FS_ENOMEM, "shares: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        char what[48];
        long long peer = 0;
        snprintf(what, sizeof what, "shares[%zu]", i);
        rc = want_object(e, what, err);
        if (rc == 0) {
            rc = check_keys(e, ekeys, what, err);
        }
        if (rc == 0) {
            rc = get_int(e, peer_key, 1, FS_SECAGG_MAX_PARTIES, what, &peer, err);
        }
        if (rc == 0 && (uint32_t)peer == self) {
            rc =
                fs_err_set(err, FS_EINVAL, "%s.%s: %lld is the party itself", what, peer_key, peer);
        }
        for (size_t q = 0; rc == 0 && q < i; q++) {
            uint32_t other = use_from ? cts[q].from : cts[q].to;
            if (other == (uint32_t)peer) {
                rc = fs_err_set(err, FS_EINVAL, "%s.%s: %lld repeated", what, peer_key, peer);
            }
        }
        if (rc == 0) {
            cts[i].ct = malloc(ct_len == 0 ? 1 : ct_len);
            if (cts[i].ct == NULL) {
                rc = fs_err_set(err, FS_ENOMEM, "shares: out of memory");
            }
        }
        if (rc == 0) {
            rc = get_bytes(e, "ct", cts[i].ct, ct_len, what, err);
        }
        if (rc != 0) {
            fs_secagg_share_cts_free(cts, n);
            return rc;
        }
        cts[i].len = ct_len;
        cts[i].from = use_from ? (uint32_t)peer : self;
        cts[i].to = use_from ? self : (uint32_t)peer;
    }
    *out = cts;
    *k = n;
    return 0;
}

/* ------------------------------------------------------------ R3 / R4 */

json_t *fs_wire_sig_encode(const uint8_t sig[FS_SECAGG_SIG_LEN])
{
    json_t *o = json_object();

    if (o == NULL || set_bytes(o, "sig", sig, FS_SECAGG_SIG_LEN) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int fs_wire_sig_decode(const json_t *j, uint8_t sig[FS_SECAGG_SIG_LEN], struct fs_err *err)
{
    static const char *const keys[] = {"sig", NULL};
    int rc = want_object(j, "consistency", err);

    if (rc == 0) {
        rc = check_keys(j, keys, "consistency", err);
    }
    if (rc == 0) {
        rc = get_bytes(j, "sig", sig, FS_SECAGG_SIG_LEN, "consistency", err);
    }
    return rc;
}

json_t *fs_wire_sigs_encode(const uint32_t *ids, const uint8_t (*sigs)[FS_SECAGG_SIG_LEN], size_t k)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_object();
        if (e == NULL || json_array_append_new(arr, e) != 0 ||
            json_object_set_new(e, "party", json_integer(ids[i])) != 0 ||
            set_bytes(e, "sig", sigs[i], FS_SECAGG_SIG_LEN) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int fs_wire_sigs_decode(const json_t *arr, size_t max, uint32_t **ids,
                        uint8_t (**sigs)[FS_SECAGG_SIG_LEN], size_t *k, struct fs_err *err)
{
    static const char *const keys[] = {"party", "sig", NULL};
    uint32_t *id = NULL;
    uint8_t(*sg)[FS_SECAGG_SIG_LEN] = NULL;
    size_t n;
    int rc = 0;

    *ids = NULL;
    *sigs = NULL;
    *k = 0;
    if (!json_is_array(arr)) {
        return fs_err_set(err, FS_EFORMAT, "signatures: expected an array");
    }
    n = json_array_size(arr);
    if (n > max) {
        return fs_err_set(err, FS_ERANGE, "signatures: %zu entries, at most %zu allowed", n, max);
    }
    id = calloc(n + 1, sizeof *id);
    sg = calloc(n + 1, sizeof *sg);
    if (id == NULL || sg == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "signatures: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        char what[48];
        long long party = 0;
        snprintf(what, sizeof what, "signatures[%zu]", i);
        rc = want_object(e, what, err);
        if (rc == 0) {
            rc = check_keys(e, keys, what, err);
        }
        if (rc == 0) {
            rc = get_int(e, "party", 1, FS_SECAGG_MAX_PARTIES, what, &party, err);
        }
        if (rc == 0) {
            rc = get_bytes(e, "sig", sg[i], FS_SECAGG_SIG_LEN, what, err);
        }
        for (size_t q = 0; rc == 0 && q < i; q++) {
            if (id[q] == (uint32_t)party) {
                rc = fs_err_set(err, FS_EINVAL, "%s.party: %lld repeated", what, party);
            }
        }
        if (rc != 0) {
            goto out;
        }
        id[i] = (uint32_t)party;
    }
    *ids = id;
    *sigs = sg;
    *k = n;
    id = NULL;
    sg = NULL;
out:
    free(id);
    free(sg);
    return rc;
}

/* ---- fedsvd exponents ---- */

json_t *fs_wire_exp_encode(const uint8_t sealed[FS_WIRE_SEALED_EXP_LEN])
{
    json_t *o = json_object();

    if (o == NULL || set_bytes(o, "sealed", sealed, FS_WIRE_SEALED_EXP_LEN) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int fs_wire_exp_decode(const json_t *j, uint8_t sealed[FS_WIRE_SEALED_EXP_LEN], struct fs_err *err)
{
    static const char *const keys[] = {"sealed", NULL};
    int rc = want_object(j, "exponent", err);

    if (rc == 0) {
        rc = check_keys(j, keys, "exponent", err);
    }
    if (rc == 0) {
        rc = get_bytes(j, "sealed", sealed, FS_WIRE_SEALED_EXP_LEN, "exponent", err);
    }
    return rc;
}

json_t *fs_wire_exps_encode(const uint32_t *ids, const uint8_t (*sealed)[FS_WIRE_SEALED_EXP_LEN],
                            size_t k)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_object();
        if (e == NULL || json_array_append_new(arr, e) != 0 ||
            json_object_set_new(e, "party", json_integer(ids[i])) != 0 ||
            set_bytes(e, "sealed", sealed[i], FS_WIRE_SEALED_EXP_LEN) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int fs_wire_exps_decode(const json_t *arr, uint32_t n, uint32_t **ids,
                        uint8_t (**sealed)[FS_WIRE_SEALED_EXP_LEN], size_t *k, struct fs_err *err)
{
    static const char *const keys[] = {"party", "sealed", NULL};
    uint32_t *id = NULL;
    uint8_t(*sl)[FS_WIRE_SEALED_EXP_LEN] = NULL;
    size_t m;
    int rc = 0;

    *ids = NULL;
    *sealed = NULL;
    *k = 0;
    if (!json_is_array(arr)) {
        return fs_err_set(err, FS_EFORMAT, "exponents: expected an array");
    }
    m = json_array_size(arr);
    if (m > n) {
        return fs_err_set(err, FS_ERANGE, "exponents: %zu entries, at most %u allowed", m, n);
    }
    id = calloc(m + 1, sizeof *id);
    sl = calloc(m + 1, sizeof *sl);
    if (id == NULL || sl == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "exponents: out of memory");
        goto out;
    }
    for (size_t i = 0; i < m; i++) {
        json_t *e = json_array_get(arr, i);
        char what[48];
        long long party = 0;
        snprintf(what, sizeof what, "exponents[%zu]", i);
        rc = want_object(e, what, err);
        if (rc == 0) {
            rc = check_keys(e, keys, what, err);
        }
        if (rc == 0) {
            rc = get_int(e, "party", 1, (long long)n, what, &party, err);
        }
        if (rc == 0) {
            rc = get_bytes(e, "sealed", sl[i], FS_WIRE_SEALED_EXP_LEN, what, err);
        }
        for (size_t q = 0; rc == 0 && q < i; q++) {
            if (id[q] == (uint32_t)party) {
                rc = fs_err_set(err, FS_EINVAL, "%s.party: %lld repeated", what, party);
            }
        }
        if (rc != 0) {
            goto out;
        }
        id[i] = (uint32_t)party;
    }
    *ids = id;
    *sealed = sl;
    *k = m;
    id = NULL;
    sl = NULL;
out:
    free(id);
    free(sl);
    return rc;
}

json_t *fs_wire_pubexp_encode(int e)
{
    return json_pack("{s:i}", "exponent", e);
}

int fs_wire_pubexp_decode(const json_t *j, int *e, struct fs_err *err)
{
    static const char *const keys[] = {"exponent", NULL};
    long long x = 0;
    int rc = want_object(j, "public exponent", err);

    if (rc == 0) {
        rc = check_keys(j, keys, "public exponent", err);
    }
    if (rc == 0) {
        rc = get_int(j, "exponent", FS_WIRE_PUBEXP_MIN, FS_WIRE_PUBEXP_MAX, "public exponent", &x,
                     err);
    }
    if (rc == 0) {
        *e = (int)x;
    }
    return rc;
}

json_t *fs_wire_reveals_encode(const struct fs_secagg_reveal *rv, size_t k)
{
    json_t *o = json_object();
    json_t *arr = json_array();

    if (o == NULL || arr == NULL || json_object_set_new(o, "reveals", arr) != 0) {
        json_decref(o);
        return NULL;
    }
    for (size_t i = 0; i < k; i++) {
        json_t *e = json_object();
        const char *kind = rv[i].kind == FS_SECAGG_SELF_SEED ? "self_seed" : "mask_key";
        if (e == NULL || json_array_append_new(arr, e) != 0 ||
            json_object_set_new(e, "about", json_integer(rv[i].about)) != 0 ||
            json_object_set_new(e, "kind", json_string(kind)) != 0 ||
            set_bytes(e, "share", rv[i].share, FS_SHAMIR_SHARE_LEN) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

int fs_wire_reveals_decode(const json_t *j, size_t max, struct fs_secagg_reveal **out, size_t *k,
                           struct fs_err *err)
{
    static const char *const keys[] = {"reveals", NULL};
    static const char *const ekeys[] = {"about", "kind", "share", NULL};
    struct fs_secagg_reveal *rv = NULL;
    json_t *arr = NULL;
    size_t n;
    int rc;

    *out = NULL;
    *k = 0;
    rc = want_object(j, "reveals", err);
    if (rc == 0) {
        rc = check_keys(j, keys, "reveals", err);
    }
    if (rc == 0) {
        rc = get_array(j, "reveals", max, "", &arr, err);
    }
    if (rc != 0) {
        return rc;
    }
    n = json_array_size(arr);
    rv = calloc(n + 1, sizeof *rv);
    if (rv == NULL) {
        return fs_err_set(err, FS_ENOMEM, "reveals: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(arr, i);
        json_t *kind;
        char what[48];
        long long about = 0;
        snprintf(what, sizeof what, "reveals[%zu]", i);
        rc = want_object(e, what, err);
        if (rc == 0) {
            rc = check_keys(e, ekeys, what, err);
        }
        if (rc == 0) {
            rc = get_int(e, "about", 1, FS_SECAGG_MAX_PARTIES, what, &about, err);
        }
        for (size_t q = 0; rc == 0 && q < i; q++) {
            if (rv[q].about == (uint32_t)about) {
                rc = fs_err_set(err, FS_EINVAL, "%s.about: %lld repeated", what, about);
            }
        }
        if (rc == 0) {
            kind = json_object_get(e, "kind");
            if (kind == NULL) {
                rc = fs_err_set(err, FS_EFORMAT, "%s.kind: missing", what);
            } else if (!json_is_string(kind)) {
                rc = fs_err_set(err, FS_EFORMAT, "%s.kind: expected a string", what);
            } else if (strcmp(json_string_value(kind), "self_seed") == 0) {
                rv[i].kind = FS_SECAGG_SELF_SEED;
            } else if (strcmp(json_string_value(kind), "mask_key") == 0) {
                rv[i].kind = FS_SECAGG_MASK_KEY;
            } else {
                rc = fs_err_set(err, FS_EINVAL, "%s.kind: expected self_seed or mask_key", what);
            }
        }
        if (rc == 0) {
            rc = get_bytes(e, "share", rv[i].share, FS_SHAMIR_SHARE_LEN, what, err);
        }
        if (rc != 0) {
            fs_wipe(rv, (n + 1) * sizeof *rv);
            free(rv);
            return rc;
        }
        rv[i].about = (uint32_t)about;
    }
    *out = rv;
    *k = n;
    return 0;
}

/* ------------------------------------------------------------ ids */

json_t *fs_wire_ids_encode(const uint32_t *ids, size_t k)
{
    json_t *arr = json_array();

    if (arr == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < k; i++) {
        if (json_array_append_new(arr, json_integer(ids[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

int fs_wire_ids_decode(const json_t *arr, uint32_t n, uint32_t **out, size_t *k, struct fs_err *err)
{
    uint8_t *seen = NULL;
    uint32_t *ids = NULL;
    size_t m;
    int rc = 0;

    *out = NULL;
    *k = 0;
    if (!json_is_array(arr)) {
        return fs_err_set(err, FS_EFORMAT, "ids: expected an array");
    }
    m = json_array_size(arr);
    if (m > n) {
        return fs_err_set(err, FS_ERANGE, "ids: %zu entries, at most %u allowed", m, n);
    }
    ids = calloc(m + 1, sizeof *ids);
    seen = calloc((size_t)n + 1, 1);
    if (ids == NULL || seen == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "ids: out of memory");
        goto out;
    }
    for (size_t i = 0; i < m; i++) {
        json_t *v = json_array_get(arr, i);
        json_int_t x;
        if (!json_is_integer(v)) {
            rc = fs_err_set(err, FS_EFORMAT, "ids[%zu]: expected an integer", i);
            goto out;
        }
        x = json_integer_value(v);
        if (x < 1 || x > (json_int_t)n) {
            rc = fs_err_set(err, FS_EINVAL, "ids[%zu]: %lld outside 1..%u", i, (long long)x, n);
            goto out;
        }
        if (seen[x]) {
            rc = fs_err_set(err, FS_EINVAL, "ids[%zu]: %lld repeated", i, (long long)x);
            goto out;
        }
        seen[x] = 1;
        ids[i] = (uint32_t)x;
    }
    *out = ids;
    *k = m;
    ids = NULL;
out:
    free(ids);
    free(seen);
    return rc;
}
