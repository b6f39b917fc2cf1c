/* Signed requests: see reqsig.h. */
#include "reqsig.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "../core/hex.h"
#include "rand.h"

#define MSG_MAX                                                                                    \
    (sizeof FS_REQSIG_DOMAIN + 16 + FS_REQSIG_PATH_MAX + FS_REQSIG_ID_MAX + 16 + 24 +              \
     2 * FS_REQSIG_NONCE_LEN + 8)
#define MAX_PARTY 1000

/* A field of the signed text: 1..max bytes of printable ASCII, no '\n'. */
static int field_ok(const char *s, size_t max, int allow_query)
{
    size_t n = s != NULL ? strnlen(s, max + 1) : 0;

    if (n == 0 || n > max) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c <= 0x20 || c >= 0x7f || (!allow_query && c == '?')) {
            return 0;
        }
    }
    return 1;
}

/* The signed text into buf (MSG_MAX); its length, or 0 on a bad field. */
static size_t message(char *buf, const char *method, const char *path, const char *maskset,
                      uint32_t party, const char *ts, const char *nonce)
{
    int n;

    if (!field_ok(method, 16, 0) || !field_ok(path, FS_REQSIG_PATH_MAX, 0) ||
        !field_ok(maskset, FS_REQSIG_ID_MAX, 0) || party < 1 || party > MAX_PARTY) {
        return 0;
    }
    n = snprintf(buf, MSG_MAX, "%s\n%s\n%s\n%s\n%u\n%s\n%s", FS_REQSIG_DOMAIN, method, path,
                 maskset, party, ts, nonce);
    if (n < 0 || (size_t)n >= MSG_MAX) {
        return 0;
    }
    return (size_t)n;
}

int fs_reqsig_sign(const uint8_t priv[FS_ED25519_KEY_LEN], const char *method, const char *path,
                   const char *maskset, uint32_t party, int64_t ts, const uint8_t *nonce,
                   char out[FS_REQSIG_HEADER_MAX], struct fs_err *err)
{
    uint8_t nb[FS_REQSIG_NONCE_LEN];
    uint8_t sig[FS_ED25519_SIG_LEN];
    char nonce_hex[2 * FS_REQSIG_NONCE_LEN + 1];
    char sig_hex[2 * FS_ED25519_SIG_LEN + 1];
    char ts_text[24];
    char msg[MSG_MAX];
    size_t len;
    int rc;

    out[0] = '\0';
    if (nonce != NULL) {
        memcpy(nb, nonce, sizeof nb);
    } else {
        rc = fs_rand_bytes(nb, sizeof nb, err);
        if (rc != 0) {
            return rc;
        }
    }
    fs_hex_encode(nb, sizeof nb, nonce_hex);
    snprintf(ts_text, sizeof ts_text, "%lld", (long long)ts);
    len = message(msg, method, path, maskset, party, ts_text, nonce_hex);
    if (len == 0) {
        return fs_err_set(err, FS_EINVAL,
                          "signed request: method, path (no query string) and mask set must be "
                          "1..%d printable characters, party 1..%d",
                          FS_REQSIG_PATH_MAX, MAX_PARTY);
    }
    rc = fs_ed25519_sign(sig, priv, msg, len, err);
    if (rc != 0) {
        return rc;
    }
    fs_hex_encode(sig, sizeof sig, sig_hex);
    snprintf(out, FS_REQSIG_HEADER_MAX, "%s party=%u,ts=%s,nonce=%s,sig=%s", FS_REQSIG_SCHEME,
             party, ts_text, nonce_hex, sig_hex);
    return 0;
}

int fs_reqsig_is_scheme(const char *header)
{
    size_t n = sizeof FS_REQSIG_SCHEME - 1;

    return header != NULL && strncasecmp(header, FS_REQSIG_SCHEME, n) == 0 && header[n] == ' ';
}

/* "name=" at *p; advances past it. */
static int take_name(const char **p, const char *name)
{
    size_t n = strlen(name);

    if (strncmp(*p, name, n) != 0 || (*p)[n] != '=') {
        return -1;
    }
    *p += n + 1;
    return 0;
}

/* Decimal digits at *p up to the next ',' or the end: no sign (unless
 * allow_minus), no leading zeros, at most 19 digits. */
static int take_dec(const char **p, int allow_minus, int64_t *out, char *text, size_t cap)
{
    const char *s = *p;
    size_t i = 0;
    int neg = 0;
    int64_t v = 0;

    if (allow_minus && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (s[i] < '0' || s[i] > '9' || (s[i] == '0' && s[i + 1] >= '0' && s[i + 1] <= '9')) {
        return -1;
    }
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        if (i - (size_t)neg >= 18) {
            return -1;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (neg && v == 0) {
        return -1; /* "-0" */
    }
    if (text != NULL) {
        if (i >= cap) {
            return -1;
        }
        memcpy(text, s, i);
        text[i] = '\0';
    }
    *out = neg ? -v : v;
    *p = s + i;
    return 0;
}

/* Exactly 2n lower-case hex digits at *p into out (n bytes). */
static int take_hex(const char **p, uint8_t *out, size_t n)
{
    const char *s = *p;

    for (size_t i = 0; i < 2 * n; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return -1;
        }
    }
    if (fs_hex_decode(s, out, n) != 0) {
        return -1;
    }
    *p = s + 2 * n;
    return 0;
}

int fs_reqsig_parse(const char *header, struct fs_reqsig *out, struct fs_err *err)
{
    uint8_t nonce[FS_REQSIG_NONCE_LEN];
    const char *p;
    int64_t v = 0;

    memset(out, 0, sizeof *out);
    if (header == NULL) {
        return fs_err_set(err, FS_EAUTH, "missing Authorization header (expected %s)",
                          FS_REQSIG_SCHEME);
    }
    if (!fs_reqsig_is_scheme(header)) {
        return fs_err_set(err, FS_EAUTH, "Authorization: expected the %s scheme", FS_REQSIG_SCHEME);
    }
    p = header + sizeof FS_REQSIG_SCHEME;
    if (take_name(&p, "party") != 0 || take_dec(&p, 0, &v, NULL, 0) != 0 || v < 1 ||
        v > MAX_PARTY || *p++ != ',') {
        return fs_err_set(err, FS_EAUTH, "%s: expected party=<1..%d> first", FS_REQSIG_SCHEME,
                          MAX_PARTY);
    }
    out->party = (uint32_t)v;
    if (take_name(&p, "ts") != 0 ||
        take_dec(&p, 1, &out->ts, out->ts_text, sizeof out->ts_text) != 0 || *p++ != ',') {
        return fs_err_set(err, FS_EAUTH, "%s: expected ts=<Unix seconds> after party",
                          FS_REQSIG_SCHEME);
    }
    if (take_name(&p, "nonce") != 0 || take_hex(&p, nonce, sizeof nonce) != 0 || *p++ != ',') {
        return fs_err_set(err, FS_EAUTH, "%s: expected nonce=<%d lower-case hex digits> after ts",
                          FS_REQSIG_SCHEME, 2 * FS_REQSIG_NONCE_LEN);
    }
    fs_hex_encode(nonce, sizeof nonce, out->nonce);
    if (take_name(&p, "sig") != 0 || take_hex(&p, out->sig, sizeof out->sig) != 0 || *p != '\0') {
        return fs_err_set(err, FS_EAUTH,
                          "%s: expected sig=<%d lower-case hex digits> last, nothing after it",
                          FS_REQSIG_SCHEME, 2 * FS_ED25519_SIG_LEN);
    }
    return 0;
}

int fs_reqsig_verify(const struct fs_reqsig *rs, const uint8_t pub[FS_ED25519_KEY_LEN],
                     const char *method, const char *path, const char *maskset, int64_t now,
                     struct fs_err *err)
{
    char msg[MSG_MAX];
    size_t len;
    int64_t skew = now - rs->ts;
    int rc;

    if (skew > FS_REQSIG_WINDOW_S || skew < -FS_REQSIG_WINDOW_S) {
        return fs_err_set(err, FS_EAUTH,
                          "%s: ts %lld is %lld s away from the server's clock (at most %d s "
                          "allowed): check the party's clock",
                          FS_REQSIG_SCHEME, (long long)rs->ts, (long long)(skew < 0 ? -skew : skew),
                          FS_REQSIG_WINDOW_S);
    }
    len = message(msg, method, path, maskset, rs->party, rs->ts_text, rs->nonce);
    if (len == 0) {
        return fs_err_set(err, FS_EAUTH, "%s: this request cannot be verified (path too long)",
                          FS_REQSIG_SCHEME);
    }
    rc = fs_ed25519_verify(rs->sig, pub, msg, len, err);
    if (rc == FS_EAUTH) {
        return fs_err_set(err, FS_EAUTH,
                          "%s: the signature does not verify under party %u's pinned identity "
                          "for %s %s",
                          FS_REQSIG_SCHEME, rs->party, method, path);
    }
    return rc;
}
